"""A Pipecat bot hands its call over at a deploy or a drain by ending its pipeline with
``EndFrame(reason=HANDOVER)``: the pipeline ends, and the next pipeline made with the same
``session_key`` takes the call over on the same server session with none of the user's speech
lost and the answer in progress told once. Real Pipecat pipelines on the emulator."""

from __future__ import annotations

import asyncio
import signal

from pipecat.frames.frames import (
    EndFrame,
    ErrorFrame,
    InputTextRawFrame,
    LLMFullResponseEndFrame,
    TTSAudioRawFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext

from realtime_resumption.frames import HANDOVER, GenerationEndedFrame, SessionMovedFrame
from realtime_resumption.move_reports import MoveOutcome, MoveReason
from realtime_resumption.store import MemoryStore, hand_over_on
from realtime_resumption.testing.emulator import Emulator
from realtime_resumption.transport import GenerationEndReason

from ..pipecat.rig import Rig, emulator_config, stream_audio
from .takeover_helpers import KEY, saved
from .test_takeover_pipecat import bot


async def hand_over(rig: Rig) -> None:
    """The app ends the pipeline marking the end as a handover (queued as any EndFrame)."""
    await rig.end(EndFrame(reason=HANDOVER))


async def test_a_handover_end_frame_ends_the_pipeline_and_the_next_keeps_all_the_speech() -> None:
    store = MemoryStore()
    async with Emulator(emulator_config()) as emu:
        a = bot(emu, store)
        async with Rig([a]) as rig_a:
            await rig_a.context()
            await rig_a.wait(lambda: rig_a.count(LLMFullResponseEndFrame) >= 1)
            # The user talks; the EndFrame comes in order after the speech queued before it.
            await stream_audio(rig_a, 1, 40, speech=True)
            await hand_over(rig_a)
            assert not a.transport.is_connected
            assert await store.load(KEY) is not None  # kept for the next pipeline
        b = bot(emu, store)
        async with Rig([b]) as rig_b:
            await rig_b.context(LLMContext())
            await stream_audio(rig_b, 1000, 10, speech=True)

    (moved,) = rig_b.of(SessionMovedFrame)
    assert (moved.report.reason, moved.report.outcome) == (
        MoveReason.TAKEOVER,
        MoveOutcome.RESUMED,
    )
    (session,) = emu.ledger.sessions.values()  # the same server session
    summary = emu.ledger.summary().sessions[session.session_id]
    assert summary.speech_lost == ()
    assert set(range(1, 41)) | set(range(1000, 1010)) <= set(summary.audio_consumed)
    assert rig_a.of(ErrorFrame, up=True) == [] and rig_b.of(ErrorFrame, up=True) == []


async def test_a_handover_end_frame_mid_answer_lets_it_finish_and_it_is_not_told_again() -> None:
    store = MemoryStore()
    async with Emulator(emulator_config(answer_chunks=40)) as emu:
        a = bot(emu, store)
        async with Rig([a]) as rig_a:
            await rig_a.context()
            await rig_a.wait(lambda: rig_a.count(LLMFullResponseEndFrame) >= 1)
            await rig_a.queue(InputTextRawFrame("tell me a story"))
            told = rig_a.count(TTSAudioRawFrame)
            await rig_a.wait(lambda: rig_a.count(TTSAudioRawFrame) > told)  # it is telling
            await hand_over(rig_a)
        b = bot(emu, store)
        async with Rig([b]) as rig_b:
            await rig_b.context(LLMContext())
            await rig_b.queue(InputTextRawFrame("and then?"))
            await rig_b.wait(lambda: rig_b.count(LLMFullResponseEndFrame) >= 1)

    ends = [f.reason for f in rig_a.of(GenerationEndedFrame)]
    assert ends == [GenerationEndReason.GENERATION_COMPLETE] * 2  # the story not cut
    (moved,) = rig_b.of(SessionMovedFrame)
    assert (moved.report.reason, moved.report.outcome) == (
        MoveReason.TAKEOVER,
        MoveOutcome.RESUMED,
    )
    (session,) = emu.ledger.sessions.values()
    turns = emu.ledger.summary().sessions[session.session_id].turns
    # The greeting, the story once, the next answer: nothing retold, nothing cut.
    assert [t.outcome for t in turns] == ["complete", "complete", "complete"]
    assert rig_b.count(GenerationEndedFrame) == 1


async def test_a_plain_end_frame_still_ends_the_call() -> None:
    store = MemoryStore()
    async with Emulator(emulator_config()) as emu:
        async with Rig([bot(emu, store)]) as rig:
            await rig.context()
            await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 1)
            await saved(store, lambda _: True)
            assert await store.load(KEY) is not None  # saved while the call runs
        assert await store.load(KEY) is None  # the call is over: nothing to take over


async def test_a_signal_hands_the_service_s_call_over_then_the_pipeline_ends() -> None:
    """As the README says for Pipecat's WorkerRunner run with ``handle_sigterm=False``: the
    signal hands the service's call over, then ``then`` ends the pipeline with a plain
    EndFrame (SIGUSR1 here, raised in this process: SIGTERM would end the test run)."""
    store = MemoryStore()
    async with Emulator(emulator_config()) as emu:
        a = bot(emu, store)
        async with Rig([a]) as rig_a:
            await rig_a.context()
            await rig_a.wait(lambda: rig_a.count(LLMFullResponseEndFrame) >= 1)
            await stream_audio(rig_a, 1, 20, speech=True)
            ended = asyncio.Event()

            async def end_pipeline() -> None:
                await rig_a.worker.queue_frame(EndFrame())
                ended.set()

            uninstall = hand_over_on(signal.SIGUSR1, a, then=end_pipeline)
            try:
                signal.raise_signal(signal.SIGUSR1)
                async with asyncio.timeout(10):
                    await ended.wait()
            finally:
                uninstall()
        assert await store.load(KEY) is not None
        b = bot(emu, store)
        async with Rig([b]) as rig_b:
            await rig_b.context(LLMContext())
            await stream_audio(rig_b, 1000, 10, speech=True)

    (moved,) = rig_b.of(SessionMovedFrame)
    assert moved.report.reason == MoveReason.TAKEOVER
    (session,) = emu.ledger.sessions.values()
    summary = emu.ledger.summary().sessions[session.session_id]
    assert summary.speech_lost == ()
    assert set(range(1, 21)) <= set(summary.audio_consumed)
