"""Our Pipecat service on gemini-3.8-live: tools declared as stock declares them, a
non-blocking function across a move, a settings update the model takes in the session."""

from __future__ import annotations

import asyncio

from pipecat.frames.frames import (
    ErrorFrame,
    FunctionCallInProgressFrame,
    FunctionCallResultFrame,
    InputTextRawFrame,
    LLMFullResponseEndFrame,
    LLMMessagesAppendFrame,
    LLMUpdateSettingsFrame,
)
from pipecat.services.llm_service import FunctionCallParams

from realtime_resumption.frames import SessionMovedFrame, SessionResumptionUpdateFrame
from realtime_resumption.gemini import Credential
from realtime_resumption.move_reports import MoveOutcome
from realtime_resumption.pipecat import GeminiLiveLLMService, GeminiLiveVertexLLMService
from realtime_resumption.testing.emulator import Emulator

from ..transport.transport_helpers import (
    MODEL_38,
    live38_config,
    only_session,
    sends_context_updates,
)
from . import services
from .rig import FAST, Rig, until


def _ours(emu: Emulator) -> GeminiLiveLLMService:
    """Our service on gemini-3.8-live with the ``lookup`` tool (no handler yet)."""
    return GeminiLiveLLMService(
        api_key="emulator-key",
        http_options=emu.http_options(),
        settings=GeminiLiveLLMService.Settings(model=MODEL_38),
        tools=services.LOOKUP,
        resumption=FAST,
    )


async def test_a_function_registered_as_usual_holds_its_answer_on_3_8() -> None:
    # 3.8 runs calls non-blocking by default: stock declares the usual (synchronous)
    # functions BLOCKING, so the answer waits for the result; ours must too.
    async with Emulator(live38_config(answer_chunks=4)) as emu:
        service = _ours(emu)
        service.register_function("lookup", services.answer_lookup)
        async with Rig([service]) as rig:
            await rig.queue(InputTextRawFrame("please lookup flights"))
            await rig.wait(lambda: rig.count(FunctionCallResultFrame) >= 1)
            await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 1)
        session = only_session(emu)
    # The response answered a call the model waited for, not a running one.
    assert session.tool_results_taken == []
    assert session.unawaited_tool_responses == [] and session.stranded_tool_responses == []
    assert [t.outcome for t in session.turns.values()] == ["complete"]
    assert rig.of(ErrorFrame, up=True) == []


async def test_a_non_blocking_function_holds_no_move_and_its_result_reaches_the_new_session() -> (
    None
):
    release = asyncio.Event()

    async def slow_lookup(params: FunctionCallParams) -> None:
        await release.wait()
        await params.result_callback({"flight": "LH 123"})

    async with Emulator(live38_config(answer_chunks=4)) as emu:
        service = _ours(emu)
        service.register_function("lookup", slow_lookup, cancel_on_interruption=False)
        async with Rig([service]) as rig:
            await rig.queue(InputTextRawFrame("please lookup flights"))
            await rig.wait(lambda: rig.count(FunctionCallInProgressFrame) >= 1)
            # The model talked on: its answer ends while the function runs.
            await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 1)
            await rig.wait(lambda: rig.count(SessionResumptionUpdateFrame) >= 1)
            emu.faults.go_away(20.0)
            await rig.wait(lambda: rig.count(SessionMovedFrame) >= 1)
            release.set()
            await rig.wait(lambda: rig.count(FunctionCallResultFrame) >= 1)
            # The model answers the result (WHEN_IDLE) on the new connection.
            await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 2)
        session = only_session(emu)
    (moved,) = rig.of(SessionMovedFrame)
    assert moved.report.outcome is MoveOutcome.RESUMED
    served = [c.index for c in session.connections if c.established]
    assert [(t.connection, t.scheduling) for t in session.tool_results_taken] == [
        (served[-1], "WHEN_IDLE")
    ]
    (answer,) = [t for t in session.turns.values() if t.answers_result]
    assert (answer.connection, answer.outcome) == (served[-1], "complete")
    assert session.stranded_tool_responses == [] and session.unawaited_tool_responses == []
    assert emu.ledger.summary().sessions[session.session_id].answers_cut == ()
    assert rig.of(ErrorFrame, up=True) == []


@sends_context_updates
async def test_an_instructions_update_on_3_8_through_vertex_opens_no_connection() -> None:
    async def tokens() -> Credential:
        return Credential("emulator-token")

    async with Emulator(live38_config("vertex", answer_chunks=4)) as emu:
        service = GeminiLiveVertexLLMService(
            location="us-central1",
            project_id="emulator-project",
            credential_provider=tokens,
            http_options=emu.http_options(),
            settings=GeminiLiveVertexLLMService.Settings(model=MODEL_38),
            resumption=FAST,
        )
        async with Rig([service]) as rig:
            await rig.queue(InputTextRawFrame("hello there"))
            await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 1)
            delta = GeminiLiveLLMService.Settings(system_instruction="Be brief.")
            await rig.queue(LLMUpdateSettingsFrame(delta=delta))
            await rig.queue(InputTextRawFrame("hello again"))
            await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 2)
        session = only_session(emu)
    assert len(session.connections) == 1
    assert [(u.system_instruction, u.outcome) for u in session.context_updates] == [
        ("Be brief.", "applied")
    ]
    assert session.state is not None and session.state.system_instruction == "Be brief."
    assert rig.of(SessionMovedFrame) == []
    assert rig.of(ErrorFrame, up=True) == []


async def test_messages_appended_mid_session_on_3_8_are_taken_without_a_move() -> None:
    # 3.8 seeds history with content (historyConfig) and takes content for the whole
    # session: a quiet append after the user spoke goes to the live connection.
    async with Emulator(live38_config(answer_chunks=2)) as emu:
        service = _ours(emu)
        async with Rig([service]) as rig:
            await rig.queue(InputTextRawFrame("hello there"))
            await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 1)
            await rig.queue(
                LLMMessagesAppendFrame(
                    messages=[{"role": "user", "content": "my name is Ada"}], run_llm=False
                )
            )
            await until(
                lambda: any(
                    m.kind == "client_content"
                    for c in only_session(emu).connections
                    for m in c.client_messages
                )
            )
            await rig.queue(InputTextRawFrame("what is my name"))
            await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 2)
        session = only_session(emu)
    (conn,) = session.connections
    assert conn.setup is not None
    contents = [m for m in conn.client_messages if m.kind == "client_content"]
    assert [(m.turns, m.turn_complete) for m in contents] == [
        ((("user", "my name is Ada"),), False)
    ]
    assert conn.close_code != 1007
    assert [t.user_text for t in session.turns.values()] == [
        "hello there",
        "my name is Ada what is my name",
    ]
    assert rig.of(SessionMovedFrame) == [] and rig.of(ErrorFrame, up=True) == []
