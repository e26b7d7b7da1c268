"""A Pipecat bot's call survives its worker: pipeline A talks and dies; pipeline B, made with the
same ``session_key``, takes the call over and answers the next question on the same server
session, without seeding its context again. Real Pipecat pipelines on the emulator."""

from __future__ import annotations

from pipecat.frames.frames import ErrorFrame, InputTextRawFrame, LLMFullResponseEndFrame
from pipecat.processors.aggregators.llm_context import LLMContext

from realtime_resumption.frames import (
    SessionLostFrame,
    SessionMovedFrame,
    SessionResumptionUpdateFrame,
)
from realtime_resumption.move_reports import MoveOutcome, MoveReason
from realtime_resumption.pipecat import GeminiLiveLLMService
from realtime_resumption.store import LeaseLostError, MemoryStore
from realtime_resumption.testing.emulator import Emulator

from ..pipecat import services
from ..pipecat.rig import Rig, emulator_config
from .conftest import Clock
from .takeover_helpers import KEY, OPTIONS, crash, saved


def bot(emu: Emulator, store: MemoryStore) -> GeminiLiveLLMService:
    return services.ours(
        emu,
        system_instruction="You are a helpful assistant.",
        store=store,
        session_key=KEY,
        store_options=OPTIONS,
    )


async def test_a_pipecat_call_taken_over_continues_its_session() -> None:
    store = MemoryStore()
    async with Emulator(emulator_config()) as emu:
        a = bot(emu, store)
        async with Rig([a]) as rig_a:
            await rig_a.context()
            await rig_a.wait(lambda: rig_a.count(LLMFullResponseEndFrame) >= 1)
            await rig_a.queue(InputTextRawFrame("my name is Ada"))
            await rig_a.wait(lambda: rig_a.count(LLMFullResponseEndFrame) >= 2)
            await rig_a.wait(lambda: rig_a.count(SessionResumptionUpdateFrame) >= 2)
            await saved(store, lambda s: s.handle == a.transport.resumption_handle)
            await crash(a.transport)
            await rig_a.cancel()
        b = bot(emu, store)
        async with Rig([b]) as rig_b:
            # The new process's context: the app's, as at the start of any call.
            await rig_b.context(LLMContext())
            await rig_b.queue(InputTextRawFrame("what is my name?"))
            await rig_b.wait(lambda: rig_b.count(LLMFullResponseEndFrame) >= 1)

    (moved,) = rig_b.of(SessionMovedFrame)
    assert (moved.report.reason, moved.report.outcome) == (
        MoveReason.TAKEOVER,
        MoveOutcome.RESUMED,
    )
    (session,) = emu.ledger.sessions.values()  # the same server session
    taken = session.connections[-1]
    kinds = [m.kind for m in taken.client_messages]
    assert "client_content" not in kinds or all(
        m.turn_complete for m in taken.client_messages if m.kind == "client_content"
    )  # no seed of the context again: only the new question
    turns = emu.ledger.summary().sessions[session.session_id].turns
    assert [t.outcome for t in turns] == ["complete", "complete", "complete"]
    assert rig_b.of(ErrorFrame, up=True) == []


async def test_a_pipecat_call_handed_over_at_a_deploy_continues_in_the_next_pipeline() -> None:
    store = MemoryStore()
    async with Emulator(emulator_config()) as emu:
        a = bot(emu, store)
        async with Rig([a]) as rig_a:
            await rig_a.context()
            await rig_a.wait(lambda: rig_a.count(LLMFullResponseEndFrame) >= 1)
            await rig_a.queue(InputTextRawFrame("my name is Ada"))
            await rig_a.wait(lambda: rig_a.count(LLMFullResponseEndFrame) >= 2)
            await a.hand_over()
            # The pipeline ends as at any deploy: EndFrame (Rig's exit).
        b = bot(emu, store)
        async with Rig([b]) as rig_b:
            await rig_b.context(LLMContext())
            await rig_b.queue(InputTextRawFrame("what is my name?"))
            await rig_b.wait(lambda: rig_b.count(LLMFullResponseEndFrame) >= 1)

    (moved,) = rig_b.of(SessionMovedFrame)
    assert (moved.report.reason, moved.report.outcome) == (
        MoveReason.TAKEOVER,
        MoveOutcome.RESUMED,
    )
    (session,) = emu.ledger.sessions.values()
    turns = emu.ledger.summary().sessions[session.session_id].turns
    assert [t.outcome for t in turns] == ["complete", "complete", "complete"]
    assert rig_a.of(ErrorFrame, up=True) == [] and rig_b.of(ErrorFrame, up=True) == []


async def test_a_pipecat_pipeline_whose_call_another_process_took_hears_it_as_a_fatal_error() -> (
    None
):
    clock = Clock()
    store = MemoryStore(clock)
    async with Emulator(emulator_config()) as emu:
        a = bot(emu, store)
        async with Rig([a]) as rig:
            await rig.context()
            await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 1)
            # The worker stalls past its lease (the store's clock jumps) and another process
            # takes the call; the worker's next beat finds it out.
            clock.now += OPTIONS.lease_ttl + 1
            assert await store.acquire(KEY, "another process", 60)
            await rig.wait(lambda: rig.count(ErrorFrame, up=True) >= 1)
            await rig.queue(InputTextRawFrame("still there?"))  # goes nowhere now

    (error,) = rig.of(ErrorFrame, up=True)
    assert isinstance(error.exception, LeaseLostError)  # the session lost, the processor unusable
    assert len(rig.of(SessionLostFrame)) == 1
    (session,) = emu.ledger.sessions.values()
    (connection,) = session.connections
    assert connection.closed_by == "client"
    assert not any("still there" in text for m in connection.client_messages for _, text in m.turns)
